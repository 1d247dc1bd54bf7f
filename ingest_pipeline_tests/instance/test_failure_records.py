"""A document a batch failed shows failed in Dagster: record runs fail exactly its partitions
(those of the stage it failed at and after), the folder's other documents stay materialized,
and a later run that reads it cleanly turns its partitions back."""

from __future__ import annotations

from dagster import AssetCheckKey, AssetKey, DagsterEventType, SkipReason, build_run_status_sensor_context
from dagster._core.storage.event_log.base import PartitionKeyFilter
from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

from ingest_pipeline.commands.cli import main as cli
from ingest_pipeline.definitions import INGEST_JOB, build_definitions
from ingest_pipeline.instance.failure_records import RECORD_JOB, RECORD_OF_TAG, FailureRecord, failure_records
from ingest_pipeline.partitions import documents_partitions
from ingest_pipeline.resources import parts_for
from ingest_pipeline_tests.conftest import pdf_bytes, write
from ingest_pipeline_tests.dagster_helpers import temporary_instance

PAGES, CHUNK, MAP = AssetKey("pages"), AssetKey(["chunks", "pdf_v4"]), AssetKey("chunk_map_retrieval")


def test_documents_failed_alike_and_side_by_side_share_a_record_run():
    ordered = ["a", "b", "c", "d", "e", "f"]
    statuses = {
        ("a", PAGES): "FAILED in pages: x",
        ("a", MAP): "FAILED upstream, in pages: x",
        ("b", PAGES): "FAILED in pages: y",
        ("b", MAP): "FAILED upstream, in pages: y",
        ("d", PAGES): "FAILED in pages: z",  # c between: a run of its own
        ("d", MAP): "FAILED upstream, in pages: z",
        ("e", CHUNK): "FAILED in chunks/pdf@4: w",  # next to d, failed elsewhere
        ("e", AssetKey("retrieval_eval_retrieval")): "FAILED: not a per-document asset",
        ("gone", PAGES): "FAILED in pages: its partition was deleted",
    }
    records = failure_records(statuses, ordered, [PAGES, CHUNK, MAP])
    assert records == [
        FailureRecord(("a", "b"), (MAP, PAGES)),
        FailureRecord(("d",), (MAP, PAGES)),
        FailureRecord(("e",), (CHUNK,)),
    ]
    assert records[0].tags("run-1") == {
        RECORD_OF_TAG: "run-1",
        "dagster/asset_partition_range_start": "a",
        "dagster/asset_partition_range_end": "b",
        "dagster/max_retries": "0",  # never retried by an instance's run retries
    }
    assert failure_records(statuses, ordered, [PAGES, CHUNK, MAP], limit=2) == records[:2]
    assert failure_records({}, ordered, [PAGES]) == []


def _failed(instance, name: str) -> set[str]:
    """The partitions the UI's Partitions tab shows failed (the status cache it reads)."""
    value = get_and_update_asset_status_cache_value(
        instance, AssetKey.from_user_string(name), documents_partitions, dynamic_partitions_loader=instance
    )
    return set(value.deserialize_failed_partition_subsets(documents_partitions).get_partition_keys())


def _step_failures(instance, run_id: str) -> list[str]:
    return [
        event.dagster_event.step_failure_data.error.message
        for event in instance.all_logs(run_id, of_type=DagsterEventType.STEP_FAILURE)
    ]


def test_an_ingest_shows_its_failed_document_failed_from_its_stage_on_until_it_reads_cleanly(data_dir):
    sources = data_dir / "sources"
    write(sources / "notes.txt", "Barley was planted early this year.\n")
    write(sources / "cut.pdf", b"%PDF-1.7\n" + b"\x00garbage" * 50)
    assert cli(["--data", str(data_dir), "ingest"]) == 0
    instance = temporary_instance(data_dir)
    cut = next(k for k in instance.get_dynamic_partitions("documents") if k.startswith("cut"))
    for name in ("pages", "chunks/pdf_v4", "chunk_map_default", "chunk_map_retrieval", "lancedb_retrieval"):
        assert _failed(instance, name) == {cut}, name
    assert _failed(instance, "sources") == set()  # it was found and hashed: that stage went well

    runs = {r.job_name: r for r in instance.get_runs()}
    record, batch = runs[RECORD_JOB], runs[INGEST_JOB]
    assert record.tags[RECORD_OF_TAG] == batch.run_id
    # its checks keep the results the batch judged the document with, not "execution failed"
    processed = instance.event_log_storage.get_asset_check_execution_history(
        AssetCheckKey(MAP, "document_processed"), limit=1, partition_filter=PartitionKeyFilter(key=cut)
    )
    assert processed[0].run_id == record.run_id and processed[0].status.value == "FAILED"
    failures = _step_failures(instance, record.run_id)
    assert len(failures) == 1 and "pages: FAILED in pages: PDFium cannot open it" in failures[0], failures

    # Under the daemon, the sensor asks for the same record run after the batch's success.
    defs = build_definitions(parts_for(str(data_dir)).settings)
    sensor = defs.resolve_sensor_def("failed_documents_sensor")
    requests = _asked(sensor, instance, batch)
    assert len(requests) == 1
    assert requests[0].tags == FailureRecord((cut,), ()).tags(batch.run_id)
    assert set(requests[0].asset_selection) == set(record.asset_selection)
    assert AssetKey("pages") in record.asset_selection and AssetKey("sources") not in record.asset_selection

    write(sources / "cut.pdf", pdf_bytes([["Harvest ledger", "Barley planted in the rains."]]))
    assert cli(["--data", str(data_dir), "ingest"]) == 0
    for name in ("pages", "chunk_map_retrieval", "lancedb_retrieval"):
        assert _failed(instance, name) == set(), name
    assert len([r for r in instance.get_runs() if r.job_name == RECORD_JOB]) == 1  # nothing new to record
    clean = next(r for r in instance.get_runs() if r.job_name == INGEST_JOB)  # newest first
    assert clean.run_id != batch.run_id and isinstance(_asked(sensor, instance, clean), SkipReason)


def _asked(sensor, instance, run):
    """What the failed-documents sensor asks for once ``run`` succeeded."""
    success = instance.all_logs(run.run_id, of_type=DagsterEventType.RUN_SUCCESS)[0].dagster_event
    with build_run_status_sensor_context(
        sensor_name=sensor.name, dagster_event=success, dagster_instance=instance, dagster_run=run
    ) as context:
        result = sensor(context)
    return result if isinstance(result, SkipReason) else list(result)
