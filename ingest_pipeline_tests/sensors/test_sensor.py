"""The source-folder sensor through build_sensor_context on a real instance."""

import json
import os

from ingest_pipeline.definitions import build_definitions
from ingest_pipeline.partitions import DOCUMENTS, contiguous_batches
from ingest_pipeline.resources import resources_for
from ingest_pipeline.sensors.batches import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    BATCH_TAG,
)
from ingest_pipeline_tests.conftest import write
from ingest_pipeline_tests.dagster_helpers import fresh_pipeline, sensor_tick, temporary_instance


def tick(pipeline, instance, cursor=None):
    return sensor_tick(pipeline.settings, instance, cursor)


def test_contiguous_batches_cover_exactly_the_wanted_keys():
    ordered = list("abcdefgh")
    assert contiguous_batches(ordered, set("abcdh"), size=2) == [["a", "b"], ["c", "d"], ["h"]]
    assert contiguous_batches(ordered, set(), size=2) == []


def test_new_files_become_partitions_and_few_batched_runs(data_dir):
    for i in range(30):
        write(data_dir / "sources" / f"note_{i:02d}.txt", f"note number {i} about the greenhouse\n")
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    result = tick(pipeline, instance)
    keys = instance.get_dynamic_partitions(DOCUMENTS)
    assert len(keys) == 30
    ingest_runs = [r for r in result.run_requests if r.job_name == "ingest_documents"]
    assert 1 <= len(ingest_runs) <= 2  # batches, not one run per file
    covered = []
    for run in ingest_runs:
        start = keys.index(run.tags[ASSET_PARTITION_RANGE_START_TAG])
        end = keys.index(run.tags[ASSET_PARTITION_RANGE_END_TAG])
        covered += keys[start : end + 1]
    assert sorted(covered) == sorted(keys)
    # The catalog is refreshed after the runs it reflects, not beside them.
    assert not any(r.job_name == "refresh_catalog" for r in result.run_requests)
    assert json.loads(result.cursor)["seen"] == {}  # nothing is seen before its run ended
    waiting = tick(pipeline, instance, cursor=result.cursor)
    assert not waiting.run_requests and "waiting for" in waiting.skip_reason.skip_message
    for request in ingest_runs:
        execute(pipeline, instance, request)
    settled = tick(pipeline, instance, cursor=waiting.cursor)
    assert [r.job_name for r in settled.run_requests] == ["refresh_catalog"]
    assert len(json.loads(settled.cursor)["seen"]) == 30
    again = tick(pipeline, instance, cursor=settled.cursor)
    assert not again.run_requests and again.skip_reason is not None  # nothing changed


def execute(pipeline, instance, request):
    """Run a requested run in process with the request's tags, as the daemon would launch it."""
    defs = build_definitions(pipeline.settings)
    return defs.resolve_job_def(request.job_name).execute_in_process(
        instance=instance, tags=request.tags, resources=resources_for(pipeline.settings), raise_on_error=False
    )


def test_a_failed_run_is_asked_again_then_given_up_with_an_errors_row(data_dir):
    from dagster import DagsterRunStatus
    from dagster._core.test_utils import create_run_for_test

    from ingest_pipeline.storage.catalog import query

    write(data_dir / "sources" / "note.txt", "a note about the greenhouse\n")
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    cursor = tick(pipeline, instance).cursor
    for attempt in range(pipeline.settings.run_retries + 1):
        (batch_id,) = json.loads(cursor)["pending"]
        create_run_for_test(
            instance,
            job_name="ingest_documents",
            status=DagsterRunStatus.CANCELED,
            tags={BATCH_TAG: batch_id},
        )
        result = tick(pipeline, instance, cursor=cursor)
        cursor = result.cursor
        ingest = [r for r in result.run_requests if r.job_name == "ingest_documents"]
        if attempt < pipeline.settings.run_retries:
            assert len(ingest) == 1 and ingest[0].tags[BATCH_TAG] != batch_id  # asked again
            assert json.loads(cursor)["seen"] == {}
        else:
            assert ingest == []  # given up until the file changes
            assert "note.txt" in json.loads(cursor)["seen"]
    errors = query(pipeline.lake, "select stage, reason from errors").to_pylist()
    assert len(errors) == 1 and errors[0]["stage"] == "run" and "CANCELED" in errors[0]["reason"]
    write(data_dir / "sources" / "note.txt", "a changed note about the greenhouse\n")
    changed = tick(pipeline, instance, cursor=cursor)
    assert [r.job_name for r in changed.run_requests] == ["ingest_documents"]


def test_a_changed_file_is_rerun_and_a_removed_file_loses_its_rows(data_dir, sample_sources):
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    first = tick(pipeline, instance)
    keys = instance.get_dynamic_partitions(DOCUMENTS)
    for request in first.run_requests:
        execute(pipeline, instance, request)
    first = tick(pipeline, instance, cursor=first.cursor)
    notes = sample_sources / "maintenance_notes.txt"
    removed_key = next(k for k in keys if k.startswith("maintenance-notes"))
    assert pipeline.index.count("retrieval", removed_key) > 0
    csv = sample_sources / "supplier_prices.csv"
    write(csv, csv.read_text() + "Compost,bag of 40 l,7.80,Green Soil\n")
    os.utime(csv, None)
    notes.unlink()
    second = tick(pipeline, instance, cursor=first.cursor)
    ingest_runs = [r for r in second.run_requests if r.job_name == "ingest_documents"]
    assert len(ingest_runs) == 1
    assert any(r.job_name == "refresh_catalog" for r in second.run_requests)  # a removal shows at once
    changed_key = next(k for k in keys if k.startswith("supplier-prices"))
    assert ingest_runs[0].tags[ASSET_PARTITION_RANGE_START_TAG] == changed_key
    assert ingest_runs[0].tags[ASSET_PARTITION_RANGE_END_TAG] == changed_key
    assert removed_key not in instance.get_dynamic_partitions(DOCUMENTS)
    assert pipeline.index.count("retrieval", removed_key) == 0
    assert not any(removed_key in path for path in pipeline.lake.files("chunks"))
    assert not any(removed_key in path for path in pipeline.lake.files("sources"))
    assert "maintenance_notes.txt" not in json.loads(second.cursor)["seen"]
