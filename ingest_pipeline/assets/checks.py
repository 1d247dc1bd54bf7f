"""Asset checks per document: each check result belongs to the partition it judged.

A run covers many partitions, and an ``AssetCheckResult`` returned from such a run names no
partition (Dagster takes the partition from the step, and a batch step has a range). So a
later run of other documents would replace an earlier failure in the Checks tab. The checks
are therefore declared on the documents' partitions, and the step emits one
``AssetCheckEvaluation`` per document and check, each naming its partition: the Checks tab
then keeps, per document, its latest result with its failing pages or chunks as a table.
"""

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
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
from ingest_pipeline.stages import Finding
from ingest_pipeline.stages.chunk_checks import joined_findings


def document_check(name: str, asset_key: AssetKey, description: str) -> AssetCheckSpec:
    """A check judged per document: its results are kept per partition."""
    return AssetCheckSpec(name, asset=asset_key, description=description, partitions_def=documents_partitions)


def _latest_materializations(context: AssetExecutionContext):
    """Partition -> the materialization its checks judged: this step's, already stored when
    the checks follow it. The UI counts a partition's check result only against the
    partition's latest materialization; a result naming none shows as missing."""
    cache: dict[str, AssetCheckEvaluationTargetMaterializationData | None] = {}

    def latest(partition: str) -> AssetCheckEvaluationTargetMaterializationData | None:
        if partition not in cache:
            found = context.instance.fetch_materializations(
                AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=[partition]), limit=1
            ).records
            cache[partition] = (
                AssetCheckEvaluationTargetMaterializationData(
                    run_id=found[0].run_id, storage_id=found[0].storage_id, timestamp=found[0].timestamp
                )
                if found
                else None
            )
        return cache[partition]

    return latest


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


def materialized_with_checks(
    context: AssetExecutionContext, findings: Mapping[str, Sequence[Finding]]
) -> Iterator[Any]:
    """The step's events: its materialization, then each selected check's result for every
    document ``findings`` judged (document -> its findings), under that document's partition
    (in shard mode, under its shard's, the shard's documents' findings joined). A document
    the step failed or skipped has no findings, so its checks keep their last result."""
    yield MaterializeResult()
    partition = partition_of(context)
    by_partition: dict[str, list[Sequence[Finding]]] = {}
    for document, found in findings.items():
        by_partition.setdefault(partition(document), []).append(found)
    selected = context.selected_asset_check_keys
    for output_name, spec in context.assets_def.check_specs_by_output_name.items():
        if spec.key in selected:  # Dagster expects each selected check's output once
            yield Output(None, output_name=output_name)
    judged = _latest_materializations(context)
    for key, found in by_partition.items():
        for finding in found[0] if len(found) == 1 else joined_findings(list(found)):
            if AssetCheckKey(context.asset_key, finding.check) not in selected:
                continue
            yield AssetCheckEvaluation(
                target_materialization_data=judged(key),
                asset_key=context.asset_key,
                check_name=finding.check,
                passed=finding.passed,
                metadata=findings_metadata(finding),
                severity=_severity(finding),
                description=finding.description,
                partition=key,
            )
