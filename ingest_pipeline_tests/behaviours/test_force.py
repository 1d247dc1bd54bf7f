"""Recompute on purpose: a run tagged ingest/force=true (``ingest --force PATH``, or a tag
set in the launchpad) or given the run config ``resources: ingest: config: {data: ..., force: true}``
recomputes the named documents whatever their fingerprints, and a
plain re-materialization says in every document's metadata that it skipped and how to
force it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ingest_pipeline.stages import FORCE_TAG
from ingest_pipeline.storage.catalog import query
from ingest_pipeline_tests.conftest import write
from ingest_pipeline_tests.dagster_helpers import (
    fresh_pipeline,
    register,
    run_batch,
    stories,
    temporary_instance,
)

CLI = str(Path(sys.executable).parent / "ingest-pipeline")


def stage_runs(pipeline) -> dict[str, dict[str, str]]:
    """Per path: the run that last wrote its pages, claims and chunk map."""
    out: dict[str, dict[str, str]] = {}
    for table in ("pages", "claims", "chunks"):
        for row in query(
            pipeline.lake,
            f"SELECT DISTINCT s.path, t.run_id FROM {table} t JOIN sources s USING (document_id)",
        ).to_pylist():
            out.setdefault(row["path"], {})[table] = row["run_id"]
    return out


def test_a_forced_run_recomputes_and_a_plain_rerun_says_it_skipped(data_dir):
    write(data_dir / "sources" / "a.txt", "Tomatoes need water twice a week.\n")
    write(data_dir / "sources" / "b.md", "# Beans\n\nBeans climb poles and need sun.\n")
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    keys = register(pipeline, instance)
    assert run_batch(pipeline, instance, keys).success
    first = stage_runs(pipeline)

    plain = run_batch(pipeline, instance, keys)  # a re-materialization from the UI, no tag
    assert stage_runs(pipeline) == first
    per_asset = stories(plain)
    assert {"pages", "sources"} <= set(per_asset)
    for asset, partitions in per_asset.items():
        for doc, meta in partitions.items():
            if str(meta.get("status", "")).startswith("unchanged"):
                assert FORCE_TAG in meta["to_recompute"], (asset, meta)
    assert all(str(m["status"]).startswith("unchanged") for m in per_asset["pages"].values())

    forced = run_batch(pipeline, instance, keys, tags={FORCE_TAG: "true"})
    assert forced.success
    after = stage_runs(pipeline)
    assert all(run == forced.run_id for stages in after.values() for run in stages.values()), after
    assert not any(str(m["status"]).startswith("unchanged") for m in stories(forced)["pages"].values())

    # The launchpad's other way: run config for the ingest resource.
    configured = run_batch(
        pipeline,
        instance,
        keys,
        resources_config={"ingest": {"config": {"data": str(data_dir), "force": True}}},
    )
    assert configured.success
    assert {run for stages in stage_runs(pipeline).values() for run in stages.values()} == {configured.run_id}
    after = stage_runs(pipeline)

    out = subprocess.run(
        [CLI, "--data", str(data_dir), "ingest", "--force", str(data_dir / "sources" / "a.txt"), "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["documents"] == 1 and report["failed"] == 0
    cli_run = stage_runs(pipeline)
    assert set(cli_run["a.txt"].values()) == {report["run_ids"][0]}  # every stage recomputed
    assert cli_run["b.md"] == after["b.md"]  # the document not named is left alone
