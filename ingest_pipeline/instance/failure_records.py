"""Failed documents shown failed where Dagster shows failures.

A batch run covers many partitions and ends with one status for all of them, and Dagster
1.13 open source lets no step fail one partition of such a run (dagster#17836): user code
cannot log ``AssetMaterializationFailure``. What it does count as a failed partition is one
that a failed run planned and did not materialize. So after a batch, each group of the
documents it failed gets a *record run* of the ``record_failed_documents`` job: it selects
the assets whose partitions said ``FAILED`` (where the document failed and the stages after
it), covers those documents only, and each of its steps fails at once with the reasons the
batch recorded, after logging again the check results the batch gave those partitions (a
check runs in its asset's step, so the record run plans it too; without them each would show
"execution failed" in place of its result). The run does not read the documents again, so a
file that took its whole time budget to fail costs nothing more. A later run that
materializes the partition turns it back to materialized.

Documents failed alike (the same assets) and next to each other in the partitions' order
share one run, as a batch's do; the runs a batch gets are capped, and past the cap the
rest keep their status lines and the batch run's tags.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dagster import AssetKey, DagsterEventType, Failure, MetadataValue
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    MAX_RETRIES_TAG,
)

RECORD_JOB = "record_failed_documents"
# On a record run: the run whose failures it records.
RECORD_OF_TAG = "ingest_pipeline/failure_record_of"
MAX_RECORD_RUNS = 20


@dataclass(frozen=True)
class FailureRecord:
    """One record run: documents next to each other in the partitions' order, failed at the
    same assets."""

    documents: tuple[str, ...]
    assets: tuple[AssetKey, ...]

    def tags(self, run_id: str) -> dict[str, str]:
        return {
            RECORD_OF_TAG: run_id,
            ASSET_PARTITION_RANGE_START_TAG: self.documents[0],
            ASSET_PARTITION_RANGE_END_TAG: self.documents[-1],
            MAX_RETRIES_TAG: "0",  # its failure is its purpose: an instance's run retries skip it
        }


def failed_statuses(instance, run_id: str) -> dict[tuple[str, AssetKey], str]:
    """(document, asset) -> the status line of each partition the run told as failed
    (``FAILED in …`` or ``FAILED upstream, …``), from the partitions' stories (the
    observations ``assets.checks.materialized_with_checks`` logs)."""
    found: dict[tuple[str, AssetKey], str] = {}
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_OBSERVATION).records
    for record in records:
        story = record.event_log_entry.asset_observation
        if story is None or story.partition is None:
            continue
        status = story.metadata.get("status")
        text = str(getattr(status, "value", "") or "")
        if text.startswith("FAILED"):
            found[(story.partition, story.asset_key)] = text
    return found


def failure_records(
    statuses: Mapping[tuple[str, AssetKey], str],
    ordered: Sequence[str],
    recordable: Iterable[AssetKey],
    limit: int = MAX_RECORD_RUNS,
) -> list[FailureRecord]:
    """The record runs for a run's failed partitions: documents grouped by the assets they
    failed at (of those ``recordable``, the record job's), then cut where the partitions'
    order (``ordered``) puts another document between two of a group."""
    keep = set(recordable)
    failed_at: dict[str, set[AssetKey]] = {}
    for document, asset in statuses:
        if asset in keep:
            failed_at.setdefault(document, set()).add(asset)
    position = {key: i for i, key in enumerate(ordered)}
    groups: dict[frozenset[AssetKey], list[str]] = {}
    for document, assets in failed_at.items():
        if document in position:
            groups.setdefault(frozenset(assets), []).append(document)
    records = []
    for assets, documents in groups.items():
        documents.sort(key=position.__getitem__)
        run: list[str] = []
        for document in documents:
            if run and position[document] != position[run[-1]] + 1:
                records.append(FailureRecord(tuple(run), tuple(sorted(assets, key=str))))
                run = []
            run.append(document)
        records.append(FailureRecord(tuple(run), tuple(sorted(assets, key=str))))
    records.sort(key=lambda r: position[r.documents[0]])
    return records[:limit]


def raise_recorded_failure(context) -> None:
    """In a record run, fail this step with the status lines the recorded run gave this
    asset's partitions; elsewhere, nothing."""
    recorded = context.run.tags.get(RECORD_OF_TAG)
    if not recorded:
        return
    statuses = failed_statuses(context.instance, recorded)
    key = context.asset_key
    # every selected asset's: the steps after this one are skipped, and their checks with them
    selected = set(context.run.asset_selection or ()) | {key}
    for evaluation in _check_results(context.instance, recorded, selected, set(context.partition_keys)):
        context.log_event(evaluation)
    rows = [
        (document, statuses.get((document, key), "no failure recorded for this asset"))
        for document in context.partition_keys
    ]
    table = "\n".join(f"| {doc} | {_cell(status)} |" for doc, status in rows)
    first = rows[0][1] if len(rows) == 1 else f"{len(rows)} documents failed; the first: {rows[0][1]}"
    raise Failure(
        description=f"{key.to_user_string()}: {first} (recorded by run {recorded})",
        metadata={
            "recorded_by_run": MetadataValue.dagster_run(recorded),
            "documents": MetadataValue.md("| document | status |\n|---|---|\n" + table),
        },
        allow_retries=False,
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _check_results(instance, run_id: str, keys: set[AssetKey], partitions: set[str]) -> list:
    """The check evaluations ``run_id`` gave the ``partitions`` of the assets ``keys``."""
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION).records
    found = []
    for record in records:
        evaluation = record.event_log_entry.dagster_event.event_specific_data
        if evaluation.asset_key in keys and evaluation.partition in partitions:
            found.append(evaluation)
    return found
