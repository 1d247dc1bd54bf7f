"""From drop to searchable through the real daemon: `dagster dev`, the sensor and its runs.

Two figures, each with the time from the sensor tick that saw the files (the creation of the
run it requested) to the moment every dropped document has rows in LanceDB:

* one 300-byte text file dropped into a running, warmed-up instance;
* eight documents (the samples plus three corpus PDFs and a deck) dropped at once.

Beside them, in the same run: the same eight documents through `ingest-pipeline ingest` (the
asset graph in process, no daemon) as the anchor, and the daemon path with the multiprocess
executor (a process per step), so the executor choice is measured, not assumed.

    .venv/bin/python bench/daemon_bench.py [--out bench/results/daemon.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)

from ingest_pipeline_tests.dagster_dev import dagster_dev, wait_for  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus" / "files"
EIGHT = (
    "pdf/pypdf-samples__multicolumn.pdf",
    "pdf/docling__code_and_formula.pdf",
    "pdf/docling__2305.03393v1-pg9.pdf",
    "pptx/docling__docling_arch.pptx",
)


def served_documents(data: Path) -> set[str]:
    import lancedb

    try:
        table = lancedb.connect(str(data / "lancedb")).open_table("chunks_retrieval")
        return set(table.to_arrow().column("path").to_pylist())
    except Exception:
        return set()


def sensor_runs(home: Path) -> list:
    from dagster import RunsFilter

    from ingest_pipeline.instance.home import instance_for

    instance = instance_for(str(home))
    try:
        return instance.get_run_records(
            filters=RunsFilter(tags={"ingest_pipeline/source": "sensor"}, job_name="ingest_documents")
        )
    finally:
        instance.dispose()


def drop_eight(sources: Path) -> list[str]:
    from ingest_pipeline.samples import write_samples

    names = [Path(n).name for n in write_samples(str(sources))]
    for name in EIGHT:
        shutil.copy(CORPUS / name, sources / Path(name).name)
        names.append(Path(name).name)
    return sorted(Path(n).name for n in names)


def through_daemon(data: Path, executor: str, timeout: float) -> dict:
    """Eight documents dropped at once, then (warm) one small text file at a time, three times."""
    sources = data / "sources"
    sources.mkdir(parents=True, exist_ok=True)
    env = {"INGEST_SENSOR_INTERVAL": "2", "INGEST_EXECUTOR": executor}
    with dagster_dev(data, env=env) as dev:
        names = drop_eight(sources)
        wait_for(
            lambda: set(names) <= served_documents(data), timeout, 0.5, "eight documents searchable", dev
        )
        done = time.time()
        first = min(r.create_timestamp.timestamp() for r in sensor_runs(dev.home))
        eight = done - first
        runs_for_eight = len(sensor_runs(dev.home))
        small = []
        for i in range(3):  # one small file at a time, three times: the median is reported
            seen = len(sensor_runs(dev.home))
            time.sleep(3)
            name = f"small_note_{i}.txt"
            (sources / name).write_text(
                (f"Note {i}: check the drip lines in zone C before the frost. " * 6)[:300]
            )
            wait_for(lambda: name in served_documents(data), timeout, 0.25, "the small file searchable", dev)
            done = time.time()
            runs = sorted(sensor_runs(dev.home), key=lambda r: r.create_timestamp)
            small.append(
                round(done - runs[-1].create_timestamp.timestamp(), 1) if len(runs) > seen else float("nan")
            )
    return {
        "eight_documents_seconds": round(eight, 1),
        "one_small_file_seconds": sorted(small)[1],
        "one_small_file_each": small,
        "runs_for_eight": runs_for_eight,
    }


def through_cli(data: Path) -> float:
    sources = data / "sources"
    drop_eight(sources)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ingest_pipeline.commands.cli", "--data", str(data), "ingest", "--json"],
        check=True,
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, "INGEST_DATA": str(data)},
    )
    return round(time.perf_counter() - started, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "daemon.json"))
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--skip-multiprocess", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="daemon-bench-"))
    report: dict = {**provenance(), "machine": {"cores": os.cpu_count()}}
    report["cli_in_process_eight_seconds"] = through_cli(work / "cli")
    report["daemon_in_process"] = through_daemon(work / "daemon", "in_process", args.timeout)
    if not args.skip_multiprocess:
        report["daemon_multiprocess"] = through_daemon(work / "daemon_mp", "multiprocess", args.timeout)
    d = report["daemon_in_process"]
    report["ratios"] = {
        "daemon_eight_vs_cli_eight": round(
            d["eight_documents_seconds"] / report["cli_in_process_eight_seconds"], 2
        ),
        **(
            {
                "multiprocess_eight_vs_in_process_eight": round(
                    report["daemon_multiprocess"]["eight_documents_seconds"] / d["eight_documents_seconds"], 2
                )
            }
            if "daemon_multiprocess" in report
            else {}
        ),
    }
    report["targets"] = {"one_small_file_seconds": 15, "eight_documents_seconds": 45}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
