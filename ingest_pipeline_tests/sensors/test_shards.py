"""Shard mode: a partition is a shard of documents, and nothing a user reads changes."""

from __future__ import annotations

import json
import os

import pytest
from dagster import DagsterRunStatus, build_sensor_context
from dagster._core.test_utils import create_run_for_test

from ingest_pipeline.commands.ingest import QUIET, ingest
from ingest_pipeline.definitions import CATALOG_JOB, INGEST_JOB, build_definitions
from ingest_pipeline.identity import document_id
from ingest_pipeline.instance.home import instance_for
from ingest_pipeline.partitions import DOCUMENTS
from ingest_pipeline.resources import resources_for
from ingest_pipeline.sensors.batches import BATCH_TAG
from ingest_pipeline.sensors.shard_mode import evaluate_shards
from ingest_pipeline.storage.catalog import query
from ingest_pipeline.storage.shard_keys import Listed, ShardScheme, is_shard_key, source_document_id
from ingest_pipeline.storage.shards import scan
from ingest_pipeline.storage.store import Store
from ingest_pipeline_tests.conftest import write
from ingest_pipeline_tests.dagster_helpers import (
    apply_partition_requests,
    fresh_pipeline,
    sensor_tick,
    temporary_instance,
)

DOCS = {
    "notes/watering.md": (
        "# Watering\n\nTomatoes need two litres a day in summer.\n\n## Night\n\nNever water at night.\n"
    ),
    "notes/pests.txt": "Aphids gather under basil leaves.\nNeem oil keeps them away for a week.\n",
    "reports/q1.csv": "crop,kg\ntomato,48\nbasil,3\n",
    "top.txt": "A document at the top of the source root.\n",
}


def test_shard_keys_never_look_like_document_ids_and_every_document_has_one_shard():
    ids = [document_id(f"sources:{p}", p) for p in ("a.txt", "shard-00001-of-00004", "folder-x-1234abcd")]
    assert not any(is_shard_key(i) for i in ids)
    hashed, folders = ShardScheme("hash", 4), ShardScheme("folder")
    keys = {hashed.shard_of(source_document_id(p), p) for p in DOCS}
    assert all(is_shard_key(k) and k.endswith("-of-00004") for k in keys)
    by_folder = {p: folders.shard_of(source_document_id(p), p) for p in DOCS}
    assert by_folder["notes/watering.md"] == by_folder["notes/pests.txt"] != by_folder["reports/q1.csv"]
    assert all(is_shard_key(k) for k in by_folder.values())
    for scheme in (hashed, folders):  # the tick's shortcut agrees with the document's own shard
        assert all(scheme.shard_of_path(p) == scheme.shard_of(source_document_id(p), p) for p in DOCS)
    with pytest.raises(ValueError):
        ShardScheme("weekly")


def test_scan_finds_the_one_changed_file_and_defers_past_its_limit(tmp_path):
    store, scheme = Store.at(str(tmp_path / "lake")), ShardScheme("hash", 64)
    listing = [Listed(f"d/{i:04d}.txt", f"/x/d/{i:04d}.txt", 10, 1_000 + i) for i in range(2_000)]
    first = scan(store, scheme, listing, {}, limit=40)
    assert len(first.changes) == 40 and first.deferred == 24 and len(first.digests) == 40
    second = scan(store, scheme, listing, first.digests, limit=40)
    assert len(second.changes) == 24 and second.deferred == 0
    third = scan(store, scheme, listing, second.digests)
    assert third.changes == []
    touched = listing.copy()
    touched[1234] = Listed(touched[1234].path, touched[1234].uri, 11, 9_999)
    del touched[7]
    fourth = scan(store, scheme, touched, third.digests)
    found = {(c.shard, tuple(e.path for _, e in c.changed), tuple(c.removed)) for c in fourth.changes}
    assert sorted(e.path for c in fourth.changes for _, e in c.changed) == ["d/1234.txt"]
    assert [d for c in fourth.changes for d in c.removed] == [source_document_id("d/0007.txt")]
    assert len(found) <= 2


def _run_sensor_tick(p, instance, cursor):
    defs = build_definitions(p.settings)
    context = build_sensor_context(instance=instance, cursor=cursor)
    result = evaluate_shards(context, p, INGEST_JOB, CATALOG_JOB)
    apply_partition_requests(instance, result)
    resources = resources_for(p.settings)
    for request in result.run_requests or []:
        job = defs.resolve_job_def(request.job_name)
        outcome = job.execute_in_process(
            instance=instance, tags=request.tags, resources=resources, run_config=QUIET, raise_on_error=False
        )
        assert outcome.success
    return result


def _lake_files(lake_root):
    found = set()
    for folder, _, files in os.walk(lake_root):
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), lake_root)
            # "current": the CLI ingest's freshness markers, which sensor runs do not write
            if not rel.startswith(("shard_manifests", "_schemas", "embedding_cache", "current")):
                found.add(rel)
    return found


LINEAGE = (
    "SELECT chunk_id, label, profile, document_id, path, page, chunker, config_hash, reader, "
    "source_sha256 FROM chunks ORDER BY chunk_id, profile"
)


def test_shard_mode_cuts_the_same_chunks_into_the_same_lake(tmp_path):
    by_document, by_shard = tmp_path / "documents" / "data", tmp_path / "shards" / "data"
    for root in (by_document, by_shard):
        for rel, text in DOCS.items():
            write(root / "sources" / rel, text)
    write(by_shard / "ingest_pipeline.toml", '[partitions]\nmode = "hash"\nshards = 2\n')

    plain = fresh_pipeline(by_document)
    assert plain.settings.shard_scheme is None
    report = ingest(plain)
    assert not report.failed

    sharded = fresh_pipeline(by_shard)
    assert sharded.settings.shard_scheme == ShardScheme("hash", 2)
    instance = instance_for(sharded.settings.dagster_home)
    first = _run_sensor_tick(sharded, instance, None)
    keys = instance.get_dynamic_partitions(DOCUMENTS)
    assert keys and len(keys) <= 2 and all(is_shard_key(k) for k in keys)

    rows_doc = query(plain.lake, LINEAGE).to_pylist()
    rows_shard = query(sharded.lake, LINEAGE).to_pylist()
    assert rows_doc and rows_shard == rows_doc
    assert _lake_files(plain.settings.lake_root) == _lake_files(sharded.settings.lake_root)
    for view in ("sources", "pages", "claims", "embeddings", "errors"):
        cols = query(plain.lake, f"DESCRIBE {view}").column("column_name").to_pylist()
        assert query(sharded.lake, f"DESCRIBE {view}").column("column_name").to_pylist() == cols
    served = sharded.settings.default_profile
    assert sharded.index.count(served) == plain.index.count(served) > 0

    assert not any(r.job_name == CATALOG_JOB for r in first.run_requests)  # never beside the runs
    settled = _run_sensor_tick(sharded, instance, first.cursor)  # the runs ended: shards seen
    assert [r.job_name for r in settled.run_requests] == [CATALOG_JOB]
    assert sorted(json.loads(settled.cursor)["seen"]) == sorted(keys)
    idle = _run_sensor_tick(sharded, instance, settled.cursor)
    assert not idle.run_requests and idle.skip_reason

    os.remove(by_shard / "sources" / "top.txt")
    write(
        by_shard / "sources" / "notes" / "pests.txt",
        "Aphids gather under basil leaves.\nLadybirds eat them.\n",
    )
    changed = _run_sensor_tick(sharded, instance, idle.cursor)
    pests, top = source_document_id("notes/pests.txt"), source_document_id("top.txt")
    texts = (
        query(sharded.lake, f"SELECT text FROM chunks WHERE document_id = '{pests}'")
        .column("text")
        .to_pylist()
    )
    assert any("Ladybirds" in t for t in texts) and not any("Neem" in t for t in texts)
    assert (
        query(sharded.lake, f"SELECT count(*) AS n FROM chunks WHERE document_id = '{top}'").to_pylist()[0][
            "n"
        ]
        == 0
    )
    assert sharded.index.count(served, top) == 0
    assert len([r for r in changed.run_requests if r.job_name == INGEST_JOB]) == 1


def _tick(p, instance, cursor=None):
    """The real source sensor (shard mode), as the daemon would evaluate it."""
    return sensor_tick(p.settings, instance, cursor)


def _ended(instance, cursor, status):
    """Each pending batch's run, recorded as ended with ``status`` (runs are not executed)."""
    pending = json.loads(cursor)["pending"]
    for batch_id in pending:
        create_run_for_test(instance, job_name=INGEST_JOB, status=status, tags={BATCH_TAG: batch_id})
    return pending


def test_a_shard_is_seen_only_once_its_run_ended_and_a_failed_run_is_asked_again_then_given_up(tmp_path):
    data = tmp_path / "data"
    for rel, text in DOCS.items():
        write(data / "sources" / rel, text)
    write(data / "ingest_pipeline.toml", '[partitions]\nmode = "folder"\n')
    p = fresh_pipeline(data)
    instance = temporary_instance(data)
    retries = p.settings.run_retries
    shard_keys = {ShardScheme("folder").shard_of_path(rel) for rel in DOCS}

    first = _tick(p, instance)
    ingest_runs = [r for r in first.run_requests if r.job_name == INGEST_JOB]
    assert ingest_runs and all(BATCH_TAG in r.tags for r in ingest_runs)
    assert not any(r.job_name == CATALOG_JOB for r in first.run_requests)
    cursor = json.loads(first.cursor)
    assert cursor["seen"] == {}  # nothing is seen before its run ended
    assert {s for batch in cursor["pending"].values() for s in batch["files"]} == shard_keys

    # While the run is pending its shard is neither rescanned nor asked for again, even
    # when one of its files changes.
    write(
        data / "sources" / "notes" / "pests.txt", "Aphids gather under basil leaves.\nLadybirds eat them.\n"
    )
    waiting = _tick(p, instance, first.cursor)
    assert not waiting.run_requests and "waiting for" in waiting.skip_reason.skip_message
    assert json.loads(waiting.cursor)["pending"] == cursor["pending"]

    # Failed or cancelled: asked again (new batch ids), up to run_retries times.
    state = waiting.cursor
    for attempt in range(retries + 1):
        before = _ended(
            instance, state, DagsterRunStatus.CANCELED if attempt % 2 else DagsterRunStatus.FAILURE
        )
        result = _tick(p, instance, state)
        state = result.cursor
        asked = [r for r in result.run_requests if r.job_name == INGEST_JOB]
        if attempt < retries:
            again = json.loads(state)["pending"]
            assert asked and not set(again) & set(before)
            assert {s for batch in again.values() for s in batch["files"]} == shard_keys
            assert all(batch["tries"] == attempt + 1 for batch in again.values())
            assert json.loads(state)["seen"] == {}
        else:  # given up: an errors row for every document, the shards seen until a file changes
            assert asked == [] and json.loads(state)["pending"] == {}
            assert set(json.loads(state)["seen"]) == shard_keys
            assert [r.job_name for r in result.run_requests] == [CATALOG_JOB]
    errors = query(p.lake, "SELECT document_id, path, stage, reason FROM errors ORDER BY path").to_pylist()
    assert [e["path"] for e in errors] == sorted(DOCS)
    assert {e["document_id"] for e in errors} == {source_document_id(rel) for rel in DOCS}
    assert all(e["stage"] == "run" and f"tried {retries + 1} times" in e["reason"] for e in errors)
    assert not _tick(p, instance, state).run_requests  # left alone ...

    write(data / "sources" / "reports" / "q1.csv", "crop,kg\ntomato,50\n")  # ... until a file changes
    changed = _tick(p, instance, state)
    (run,) = [r for r in changed.run_requests if r.job_name == INGEST_JOB]
    reports = ShardScheme("folder").shard_of_path("reports/q1.csv")
    batch = json.loads(changed.cursor)["pending"][run.tags[BATCH_TAG]]
    assert list(batch["files"]) == [reports] and batch["tries"] == 0
    _ended(instance, changed.cursor, DagsterRunStatus.SUCCESS)
    done = _tick(p, instance, changed.cursor)
    assert [r.job_name for r in done.run_requests] == [CATALOG_JOB]  # settled: refresh after the run
    assert json.loads(done.cursor)["seen"][reports] != json.loads(state)["seen"][reports]
    assert not _tick(p, instance, done.cursor).run_requests
