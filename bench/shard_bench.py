"""Shard mode at a million documents: the real sensor tick over a generated source listing.

Generating 1,000,000 real files here would take longer than the tick being measured, so
the listing is a generated name space (``c<k>/doc<n>.txt`` with sizes and mtimes), fed to
the same ``evaluate_shards`` the sensor calls, on a real Dagster instance and a real lake
(shard manifests are written as Parquet). Runs are requested, not executed: each requested
run is recorded in the instance as one that succeeded, which is what the next tick reads
back before it counts the run's shards as seen. The anchor is
a bare pass over the same listing (building each entry and nothing else) in the same run.

    .venv/bin/python bench/shard_bench.py [--documents 1000000] [--shards 4096]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)


def listing(n: int, touched: dict[int, int] | None = None, skip: set[int] | None = None):
    from ingest_pipeline.storage.shard_keys import Listed

    touched, skip = touched or {}, skip or set()
    base = 1_700_000_000_000_000_000
    for i in range(n):
        if i in skip:
            continue
        path = f"c{i % 997:03d}/doc{i:07d}.txt"
        yield Listed(path, f"/generated/{path}", 200 + i % 1800, touched.get(i, base + i * 1_000))


def rss_mib() -> tuple[float, float]:
    fields = dict(
        line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=4096)
    args = parser.parse_args()

    from dagster import DagsterRunStatus, build_sensor_context
    from dagster._core.test_utils import create_run_for_test

    from ingest_pipeline.definitions import CATALOG_JOB, INGEST_JOB
    from ingest_pipeline.instance.home import instance_for
    from ingest_pipeline.partitions import DOCUMENTS
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.sensors.shard_mode import MAX_SHARDS_PER_TICK, evaluate_shards
    from ingest_pipeline.storage.shard_keys import ShardScheme, source_document_id
    from ingest_pipeline.storage.shards import read_manifest

    data = Path(tempfile.mkdtemp(prefix="shard-bench-")) / "data"
    (data / "sources").mkdir(parents=True)
    (data / "ingest_pipeline.toml").write_text(f'[partitions]\nmode = "hash"\nshards = {args.shards}\n')
    p = parts_for(str(data))
    instance = instance_for(p.settings.dagster_home)
    n = args.documents

    started = time.perf_counter()
    count = sum(1 for _ in listing(n))
    bare = time.perf_counter() - started
    assert count == n

    def tick(cursor, items):
        t = time.perf_counter()
        result = evaluate_shards(
            build_sensor_context(instance=instance, cursor=cursor), p, INGEST_JOB, CATALOG_JOB, listing=items
        )
        seconds = time.perf_counter() - t
        for request in result.dynamic_partitions_requests:
            if type(request).__name__ == "AddDynamicPartitionsRequest":
                instance.add_dynamic_partitions(DOCUMENTS, list(request.partition_keys))
        ingest_requests = [r for r in result.run_requests or [] if r.job_name == INGEST_JOB]
        for request in ingest_requests:  # as if each run had ended well
            create_run_for_test(
                instance, job_name=INGEST_JOB, status=DagsterRunStatus.SUCCESS, tags=request.tags
            )
        return result, seconds, len(ingest_requests)

    bootstrap, cursor, runs_total = [], None, 0
    while True:
        result, seconds, runs = tick(cursor, listing(n))
        cursor = result.cursor
        bootstrap.append(seconds)
        runs_total += runs
        if not runs:  # the last tick only settled the runs before it
            break
    idle_result, idle, _ = tick(cursor, listing(n))
    assert not idle_result.run_requests
    changed_doc = 123_456 % n
    result, changed, runs = tick(idle_result.cursor, listing(n, touched={changed_doc: 42}))
    _, removed, _ = tick(result.cursor, listing(n, touched={changed_doc: 42}, skip={7}))
    rss, peak = rss_mib()
    scheme = ShardScheme("hash", args.shards)
    target = f"c{changed_doc % 997:03d}/doc{changed_doc:07d}.txt"
    shard = scheme.shard_of(source_document_id(target), target)
    manifest = read_manifest(p.store, scheme, shard)
    found = manifest[source_document_id(target)][3] == 42
    partitions = len(instance.get_dynamic_partitions(DOCUMENTS))
    cursor_bytes = len(result.cursor.encode())
    figures = {
        **provenance(),
        "documents": n,
        "shards": args.shards,
        "partitions": partitions,
        "bootstrap_ticks": len(bootstrap),
        "max_shards_per_tick": MAX_SHARDS_PER_TICK,
        "first_tick_s": round(bootstrap[0], 2),
        "bootstrap_total_s": round(sum(bootstrap), 1),
        "runs_requested_to_bootstrap": runs_total,
        "idle_tick_s": round(idle, 2),
        "changed_file_tick_s": round(changed, 2),
        "changed_file_runs": runs,
        "changed_file_found": found,
        "removed_file_tick_s": round(removed, 2),
        "bare_listing_s": round(bare, 2),
        "idle_tick_vs_bare_listing": round(idle / bare, 2),
        "cursor_kib": round(cursor_bytes / 1024, 1),
        "rss_mib": round(rss, 0),
        "peak_rss_mib": round(peak, 0),
        "maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0),
        "lake_manifest_files": sum(1 for _ in (data / "lake" / "shard_manifests" / "hash").glob("*.parquet")),
    }
    print(json.dumps(figures, indent=2))
    print(
        f"\n{n:,} documents in {partitions:,} partitions ({args.shards} hash shards; document mode would "
        f"need {n:,}). Bootstrap: {len(bootstrap)} ticks of at most {MAX_SHARDS_PER_TICK} shards, "
        f"{sum(bootstrap):.0f} s in all, first {bootstrap[0]:.1f} s. Idle tick {idle:.1f} s "
        f"({idle / bare:.1f}x a bare pass over the listing, "
        f"{bare:.1f} s). One touched file: {changed:.1f} s, "
        f"found by its shard's digest then its manifest, {runs} run; one removed file: {removed:.1f} s "
        f"(its rows leave the lake and LanceDB). "
        f"Cursor {cursor_bytes / 1024:.0f} KiB; peak RSS {peak:.0f} MiB."
    )
    os.environ.pop("INGEST_DATA", None)


if __name__ == "__main__":
    main()
