"""Asset checks per document: each check result belongs to the partition it judged.

A run covers many partitions, and an ``AssetCheckResult`` returned from such a run names no
partition (Dagster takes the partition from the step, and a batch step has a range). So a
later run of other documents would replace an earlier failure in the Checks tab. The checks
are therefore declared on the documents' partitions, and the step emits one
``AssetCheckEvaluation`` per document and check, each naming its partition: the Checks tab
then keeps, per document, its latest result with its failing pages or chunks as a table.
"""

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetObservation,
    AssetRecordsFilter,
    MaterializeResult,
    Output,
)

# Not exported at dagster's top level: the materialization a check result judged.
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

from ingest_pipeline.assets.common import findings_table, partition_of
from ingest_pipeline.partitions import documents_partitions
from ingest_pipeline.stages import Finding, Outcome
from ingest_pipeline.stages.chunk_checks import joined_findings


def document_check(name: str, asset_key: AssetKey, description: str) -> AssetCheckSpec:
    """A check judged per document: its results are kept per partition."""
    return AssetCheckSpec(name, asset=asset_key, description=description, partitions_def=documents_partitions)


def _latest_materializations(context: AssetExecutionContext, partitions: Sequence[str]):
    """Partition -> the materialization its checks judged: this step's, already stored when
    the checks follow it. The UI counts a partition's check result only against the
    partition's latest materialization; a result naming none shows as missing. One query
    for the step's partitions (each was materialized once just now, so the newest records
    are theirs), then one per partition it missed."""
    found = context.instance.fetch_materializations(
        AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=list(partitions)),
        limit=len(partitions),
    ).records
    latest: dict[str, AssetCheckEvaluationTargetMaterializationData | None] = {}
    for record in found:
        latest.setdefault(record.partition_key, _target(record))
    for partition in partitions:
        if partition not in latest:
            one = context.instance.fetch_materializations(
                AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=[partition]), limit=1
            ).records
            latest[partition] = _target(one[0]) if one else None
    return latest


def _target(record) -> AssetCheckEvaluationTargetMaterializationData:
    return AssetCheckEvaluationTargetMaterializationData(
        run_id=record.run_id, storage_id=record.storage_id, timestamp=record.timestamp
    )


def _joined(found: list[Sequence[Finding]]) -> list[Finding]:
    """A shard's documents' findings, each check's joined (a document the stage did not
    judge has only ``document_processed``)."""
    by_check: dict[str, list[Finding]] = {}
    for findings in found:
        for finding in findings:
            by_check.setdefault(finding.check, []).append(finding)
    return [joined_findings([[f] for f in same])[0] for same in by_check.values()]


def findings_metadata(finding: Finding) -> dict[str, Any]:
    return {finding.table: findings_table(finding.rows), **finding.counts}


def check_result(finding: Finding) -> AssetCheckResult:
    """A finding as an asset check result (for callers outside a run, such as tests)."""
    return AssetCheckResult(
        check_name=finding.check,
        passed=finding.passed,
        severity=_severity(finding),
        description=finding.description,
        metadata=findings_metadata(finding),
    )


def _severity(finding: Finding) -> AssetCheckSeverity:
    return AssetCheckSeverity.WARN if finding.warn else AssetCheckSeverity.ERROR


def by_document(finding: Finding, documents: Sequence[str]) -> dict[str, Finding]:
    """A batch finding split per document, by the ``document`` its failing rows name."""
    rows: dict[str, list[dict[str, Any]]] = {doc: [] for doc in documents}
    for row in finding.rows:
        rows.setdefault(row.get("document"), []).append(row)
    return {
        doc: Finding(
            finding.check,
            not rows[doc],
            finding.table,
            rows[doc],
            {"count": len(rows[doc])},
            warn=finding.warn,
            description=finding.description,
        )
        for doc in documents
    }


# Every per-document asset has this check: a document that failed here or earlier shows as a
# failed check on its partition (Dagster gives a batch run's partitions one status, so the
# partition itself cannot be failed; see ``run_tags.failure_tags`` for the run's side).
PROCESSED = "document_processed"
PROCESSED_DESCRIPTION = (
    "The document went through this stage. Fails, naming the stage and its reason, when this "
    "stage or an earlier one failed on the document."
)


def processed_check(asset_key: AssetKey) -> AssetCheckSpec:
    return document_check(PROCESSED, asset_key, PROCESSED_DESCRIPTION)


def processed_findings(outcomes: Sequence[Outcome]) -> dict[str, list[Finding]]:
    """Per document, whether it went through the stage: a failure here, or a skip because an
    earlier stage failed on it (``stages.skipped`` names which), fails the check."""
    found = {}
    for outcome in outcomes:
        rows: list[dict[str, Any]] = []
        if outcome.status == "failed":
            rows = [_failure(outcome.document, outcome.detail.get("stage"), outcome.detail.get("reason"))]
        else:  # skipped because an earlier stage failed on it, or asked about its verdict page
            earlier = outcome.detail.get("failed_upstream") or ()
            rows = [_failure(outcome.document, e["stage"], e["reason"]) for e in earlier]
        found[outcome.document] = [Finding(PROCESSED, not rows, "failures", rows, {"status": outcome.status})]
    return found


def _failure(document: str, stage: Any, reason: Any) -> dict[str, Any]:
    return {"document": document, "stage": str(stage or ""), "reason": str(reason or "")}


def materialized_with_checks(
    context: AssetExecutionContext,
    outcomes: Sequence[Outcome],
    stories: Mapping[str, Mapping[str, Any]],
    findings: Mapping[str, Sequence[Finding]] | None = None,
) -> Iterator[Any]:
    """The step's events: its materialization, then each partition's story (``stories``,
    ``report_partitions``' of the same outcomes, so one per partition the step covered) as
    an observation of that partition, then each selected check's result for every document
    it judged, under that document's partition (in shard mode, under its shard's, the
    shard's documents' findings joined): ``document_processed`` for every outcome, and
    ``findings`` (document -> the stage's own findings) for each document the step neither
    failed nor skipped; those checks of a failed or skipped document keep their last
    result."""
    yield MaterializeResult()
    partition = partition_of(context)
    judged = {o.document for o in outcomes if o.status not in ("failed", "skipped")}
    by_partition: dict[str, list[Sequence[Finding]]] = {}
    for document, processed in processed_findings(outcomes).items():
        own = (findings or {}).get(document, ()) if document in judged else ()
        by_partition.setdefault(partition(document), []).append([*own, *processed])
    materialized = _latest_materializations(context, list(stories)) if stories else {}
    _after(materialized.values())
    for key, metadata in stories.items():
        yield AssetObservation(asset_key=context.asset_key, partition=key, metadata=dict(metadata))
    selected = context.selected_asset_check_keys
    for output_name, spec in context.assets_def.check_specs_by_output_name.items():
        if spec.key in selected:  # Dagster expects each selected check's output once
            yield Output(None, output_name=output_name)
    for key, found in by_partition.items():
        for finding in found[0] if len(found) == 1 else _joined(found):
            if AssetCheckKey(context.asset_key, finding.check) not in selected:
                continue
            yield AssetCheckEvaluation(
                target_materialization_data=materialized.get(key),
                asset_key=context.asset_key,
                check_name=finding.check,
                passed=finding.passed,
                metadata=findings_metadata(finding),
                severity=_severity(finding),
                description=finding.description,
                partition=key,
            )


STAMP_STEP = 0.001  # seconds: the UI compares events' times in whole milliseconds


def _after(targets: Iterable[AssetCheckEvaluationTargetMaterializationData | None]) -> None:
    """Wait until the clock has passed every given materialization's millisecond. A
    partition's page shows the observations stamped later than its latest materialization,
    to the millisecond; a document's materialization and its story are logged within one,
    sometimes."""
    latest = max((t.timestamp for t in targets if t is not None), default=0.0)
    while time.time() < latest + STAMP_STEP:
        time.sleep(STAMP_STEP)
