"""The source-folder sensor through build_sensor_context on a real instance."""

import json
import os

from dagster import build_sensor_context

from ingest_pipeline.definitions import build_definitions
from ingest_pipeline.partitions import DOCUMENTS
from ingest_pipeline.resources import IngestResource
from ingest_pipeline.partitions import contiguous_batches
from ingest_pipeline.sensors import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from ingest_pipeline_tests.conftest import write
from ingest_pipeline_tests.dagster_helpers import fresh_pipeline, run_batch, temporary_instance


def tick(pipeline, instance, cursor=None):
    defs = build_definitions(pipeline.settings)
    sensor = defs.resolve_sensor_def("source_files_sensor")
    context = build_sensor_context(instance=instance, cursor=cursor,
                                   resources={"ingest": IngestResource(data=pipeline.settings.data)})
    result = sensor(context)
    for request in result.dynamic_partitions_requests or []:  # what the daemon does with the result
        if type(request).__name__ == "AddDynamicPartitionsRequest":
            instance.add_dynamic_partitions(DOCUMENTS, list(request.partition_keys))
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(DOCUMENTS, key)
    return result


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
        covered += keys[start:end + 1]
    assert sorted(covered) == sorted(keys)
    assert any(r.job_name == "refresh_catalog" for r in result.run_requests)
    again = tick(pipeline, instance, cursor=result.cursor)
    assert not again.run_requests and again.skip_reason is not None  # nothing changed


def test_a_changed_file_is_rerun_and_a_removed_file_loses_its_rows(data_dir, sample_sources):
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    first = tick(pipeline, instance)
    keys = instance.get_dynamic_partitions(DOCUMENTS)
    run_batch(pipeline, instance, keys)
    notes = sample_sources / "maintenance_notes.txt"
    removed_key = next(k for k in keys if k.startswith("maintenance-notes"))
    assert pipeline.index.count("default", removed_key) > 0
    csv = sample_sources / "supplier_prices.csv"
    write(csv, csv.read_text() + "Compost,bag of 40 l,7.80,Green Soil\n")
    os.utime(csv, None)
    notes.unlink()
    second = tick(pipeline, instance, cursor=first.cursor)
    ingest_runs = [r for r in second.run_requests if r.job_name == "ingest_documents"]
    assert len(ingest_runs) == 1
    changed_key = next(k for k in keys if k.startswith("supplier-prices"))
    assert ingest_runs[0].tags[ASSET_PARTITION_RANGE_START_TAG] == changed_key
    assert ingest_runs[0].tags[ASSET_PARTITION_RANGE_END_TAG] == changed_key
    assert removed_key not in instance.get_dynamic_partitions(DOCUMENTS)
    assert pipeline.index.count("default", removed_key) == 0
    assert not any(removed_key in path for path in pipeline.lake.files("chunks"))
    assert not any(removed_key in path for path in pipeline.lake.files("sources"))
    assert "maintenance_notes.txt" not in json.loads(second.cursor)["seen"]
