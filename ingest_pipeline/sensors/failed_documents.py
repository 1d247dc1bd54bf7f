"""The sensor that asks for record runs (``instance.failure_records``) after a run that
failed documents, whoever launched it: the folder sensor, a backfill or a click in the UI.
The command line executes its own record runs in process, after its batches."""

from __future__ import annotations

from dagster import (
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunStatusSensorContext,
    SkipReason,
    run_status_sensor,
)

from ingest_pipeline.instance.failure_records import RECORD_OF_TAG, failed_statuses, failure_records
from ingest_pipeline.instance.run_tags import FAILED_DOCUMENTS_TAG
from ingest_pipeline.partitions import DOCUMENTS


def build_failed_documents_sensor(record_job, recordable, interval_seconds: int = 5):
    """``recordable``: the asset keys of the record job (every per-document asset)."""
    recordable = frozenset(recordable)

    @run_status_sensor(
        name="failed_documents_sensor",
        run_status=DagsterRunStatus.SUCCESS,
        request_job=record_job,
        minimum_interval_seconds=interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description="After a run that failed documents ends, asks for record runs that fail "
        "exactly those documents' partitions, so they show failed (a batch run cannot).",
    )
    def failed_documents_sensor(context: RunStatusSensorContext):
        run = context.dagster_run
        if run.job_name == record_job.name or RECORD_OF_TAG in run.tags or not run.is_partitioned:
            return SkipReason(f"run {run.run_id} has no documents to record")
        if not run.asset_selection and FAILED_DOCUMENTS_TAG not in run.tags:
            # every stage ran and none counted a failure on the run's tags (a run of some
            # stages may hold documents failed upstream of them: its events are read)
            return SkipReason(f"run {run.run_id} failed no document")
        statuses = failed_statuses(context.instance, run.run_id)
        if not statuses:
            return SkipReason(f"run {run.run_id} failed no document")
        ordered = context.instance.get_dynamic_partitions(DOCUMENTS)
        return [
            RunRequest(
                run_key=f"{run.run_id}:{record.documents[0]}",
                asset_selection=list(record.assets),
                tags=record.tags(run.run_id),
            )
            for record in failure_records(statuses, ordered, recordable)
        ]

    return failed_documents_sensor
